// Module hooks for running the SDK on plain Node: the host's imports
// (`justonce:tool/*`) resolve to stubs, so what needs no host can be tested.
const STUB =
  'data:text/javascript,' +
  encodeURIComponent(
    'export function perform() { throw new Error("no host in unit tests"); }\n' +
      'export function write() {}\n' +
      'export function report() {}\n' +
      '// content.add: the parts a test\'s tool added, in globalThis.addedContent.\n' +
      'export function add(part) { (globalThis.addedContent ??= []).push(part); }\n' +
      '// input.ask: globalThis.scriptedAsk answers, as a test scripts it.\n' +
      'export function ask(questions) { return globalThis.scriptedAsk(questions); }\n',
  );

export async function resolve(specifier, context, next) {
  if (specifier.startsWith('justonce:tool/')) return { url: STUB, shortCircuit: true };
  return next(specifier, context);
}
