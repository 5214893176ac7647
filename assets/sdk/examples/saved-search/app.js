// Saved search: keeps one search and shows what cowork remembers that
// matches it, newest matches included each time you open it.
// World "app": node build.mjs app ../examples/saved-search
//
// The query lives in storage ("query"), so the state stays "".

import { search, storageGet, storageSet } from 'cowork:app/data@0.1.0';

export function render(state) {
  const query = storageGet('query') ?? '';
  if (query === '') {
    return JSON.stringify({
      type: 'form',
      id: 'query',
      fields: [{ id: 'query', label: 'Search for', kind: 'text', value: '' }],
      submit: 'Save search',
    });
  }
  // Every field of a record is passed; an unset option is `undefined`.
  const filters = { app: undefined, sinceMs: undefined, untilMs: undefined, kind: undefined };
  const hits = search(query, filters, 20);
  return JSON.stringify([
    { type: 'text', text: `Saved search: ${query}`, style: 'heading' },
    {
      type: 'list',
      items: hits.map(hit => ({
        title: hit.title,
        subtitle: hit.snippet,
        accessory: hit.source,
        actions: [{ title: 'Ask about it', host: 'chat', text: `Tell me more about: ${hit.title}` }],
      })),
      empty: 'Nothing matches yet',
    },
    { type: 'actions', actions: [{ title: 'Change search', id: 'change' }] },
  ]);
}

export function handle(action, state) {
  const event = JSON.parse(action);
  if (event.type === 'submit' && event.form === 'query') {
    storageSet('query', String(event.values?.query ?? '').trim());
  } else if (event.type === 'action' && event.id === 'change') {
    storageSet('query', '');
  }
  return state;
}
