// A minimal cowork app: it shows the window in focus and a counter that it
// keeps in its own storage. Build it with `node build.mjs` (world "app").
//
// cowork calls render("") first. When the user clicks an action, cowork calls
// handle(action, state) and then render(the state handle returned).

import { activeWindow } from 'cowork:app/context@0.1.0';
import { storageGet, storageSet } from 'cowork:app/data@0.1.0';

// Storage holds strings: an absent key is `undefined`.
function count() {
  return Number(storageGet('count') ?? '0');
}

export function render(state) {
  const window = activeWindow(); // undefined when nothing (or something private) is in focus
  return JSON.stringify([
    { type: 'text', text: 'My first app', style: 'heading' },
    window
      ? { type: 'stat', label: 'In focus', value: window.title, note: window.app }
      : { type: 'text', text: 'Nothing in focus', style: 'muted' },
    { type: 'stat', label: 'Clicks', value: String(count()) },
    { type: 'actions', actions: [{ title: 'Click me', id: 'click' }] },
  ]);
}

export function handle(action, state) {
  const event = JSON.parse(action);
  if (event.type === 'action' && event.id === 'click') {
    storageSet('count', String(count() + 1));
  }
  return state; // this app keeps everything in storage, so the state stays ""
}
