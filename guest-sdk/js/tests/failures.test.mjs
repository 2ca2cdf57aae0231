// What an exception other than `ToolError` becomes, on plain Node (see register.mjs):
// the same exception rethrown (componentize-js then traps, and the host reports a
// `panic`), after a report of its type, message and first stack lines on stderr,
// which the host makes the trap's message.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { ToolError, describeThrown, fetch, s, tool } from '../justonce.js';

const args = s.object({});

/** What `call` throws and what it wrote with `console.error` while the tool threw `thrown`. */
function callThrowing(thrown) {
  const t = tool({ name: 'failing', description: 'Fails.', args, call: () => { throw thrown; } });
  const written = [];
  const original = console.error;
  console.error = (...parts) => written.push(parts.join(' '));
  try {
    t.call('{}');
  } catch (e) {
    return { caught: e, stderr: written.join('\n') };
  } finally {
    console.error = original;
  }
  assert.fail('call did not throw');
}

test('an Error is reported with its type, message and stack, then rethrown', () => {
  const error = new TypeError('x is not a function');
  const { caught, stderr } = callThrowing(error);
  assert.equal(caught, error);
  const report = stderr.split('justonce: uncaught exception:\n')[1].split('\njustonce: end of report')[0];
  assert.match(report, /^TypeError: x is not a function\n {4}at .*failures\.test\.mjs:\d+/);
  assert.ok(report.split('\n').length <= 5, report);
});

test('a thrown value that is not an Error is reported as what it is', () => {
  assert.equal(describeThrown('plain text'), 'a string was thrown, not an Error: plain text');
  assert.equal(describeThrown({ code: 7 }), 'a object was thrown, not an Error: {"code":7}');
  assert.equal(describeThrown(undefined), 'a undefined was thrown, not an Error: undefined');
});

test('a ToolError is the tool-error variant, not a report', () => {
  const { caught, stderr } = callThrowing(new ToolError('card_declined', 'Declined.', { retry: false }));
  assert.deepEqual(caught, {
    payload: { code: 'card_declined', message: 'Declined.', details: '{"retry":false}' },
  });
  assert.equal(stderr, '');
});

test('fetch says to use the http provider', () => {
  assert.throws(() => fetch('https://example.com/'), /fetch is not available.*`http` provider/);
});
