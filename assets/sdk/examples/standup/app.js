// Standup: drafts a standup update from yesterday's activity with cowork's
// model, lets you edit it, and keeps the last one you saved.
// World "app-with-ai": node build.mjs app-with-ai ../examples/standup
//
// State (JSON): { "draft": "...", "error": "..." }

import { recentActivity, dayStart } from 'cowork:app/context@0.1.0';
import { storageGet, storageSet } from 'cowork:app/data@0.1.0';
import { complete } from 'cowork:app/ai@0.1.0';

const DAY_MS = 86400000n; // s64 values are BigInts
const PROMPT_LIMIT = 2000; // characters of activity summary in the prompt

// The state cowork holds; "" the first time, when the last saved standup is
// the draft.
function load(state) {
  if (state) return JSON.parse(state);
  return { draft: storageGet('last') ?? '', error: '' };
}

function minutes(ms) {
  return Math.max(1, Math.round(ms / 60000));
}

// Yesterday's activity as lines "- App, 95 min: title; title; title",
// longest first, cut to about PROMPT_LIMIT characters ("" if nothing).
function yesterday() {
  const end = dayStart();
  const start = end - DAY_MS;
  const sessions = recentActivity(start, end, undefined, 500);
  const apps = new Map();
  for (const session of sessions) {
    const ms = Math.min(Number(session.endMs), Number(end)) - Math.max(Number(session.startMs), Number(start));
    if (ms <= 0) continue;
    const app = apps.get(session.app) ?? { name: session.app, ms: 0, titles: new Map() };
    app.ms += ms;
    app.titles.set(session.title, (app.titles.get(session.title) ?? 0) + ms);
    apps.set(session.app, app);
  }
  let summary = '';
  for (const app of [...apps.values()].sort((a, b) => b.ms - a.ms)) {
    const titles = [...app.titles.entries()]
      .sort((a, b) => b[1] - a[1])
      .slice(0, 3)
      .map(([title]) => title.slice(0, 80))
      .filter(title => title !== '');
    const line = `- ${app.name}, ${minutes(app.ms)} min${titles.length ? ': ' + titles.join('; ') : ''}\n`;
    if (summary.length + line.length > PROMPT_LIMIT) break;
    summary += line;
  }
  return summary;
}

function write(current) {
  const activity = yesterday();
  if (activity === '') {
    return { draft: current.draft, error: 'Nothing was recorded yesterday' };
  }
  const prompt = 'Write a short standup update (Yesterday / Today / Blockers) from this activity:\n' + activity;
  try {
    // A `result` import returns the ok value and throws on err.
    return { draft: complete(prompt).trim(), error: '' };
  } catch (e) {
    const reason = e && e.payload !== undefined ? e.payload : String(e);
    return { draft: current.draft, error: 'The model could not answer: ' + reason };
  }
}

export function render(state) {
  const { draft, error } = load(state);
  const view = [{ type: 'text', text: 'Standup', style: 'heading' }];
  if (error) view.push({ type: 'text', text: error, style: 'muted' });
  if (!draft) {
    view.push(
      { type: 'text', text: "cowork's model drafts your standup from what you worked on yesterday; you edit it and copy it where your team reads it.", style: 'body' },
      { type: 'actions', actions: [{ title: 'Write my standup', id: 'write' }] },
    );
  } else {
    view.push(
      {
        type: 'form',
        id: 'standup',
        fields: [{ id: 'text', label: 'Standup', kind: 'multiline', value: draft }],
        submit: 'Save',
      },
      {
        type: 'actions',
        actions: [
          { title: 'Write again', id: 'write' },
          { title: 'Copy', host: 'copy', text: draft },
        ],
      },
    );
  }
  return JSON.stringify(view);
}

export function handle(action, state) {
  const current = load(state);
  const event = JSON.parse(action);
  if (event.type === 'action' && event.id === 'write') {
    return JSON.stringify(write(current));
  }
  if (event.type === 'submit' && event.form === 'standup') {
    const text = String(event.values?.text ?? '');
    storageSet('last', text);
    return JSON.stringify({ draft: text, error: '' });
  }
  return JSON.stringify(current);
}
