// Focus today: how long each app had your attention since midnight.
// World "app" (the read lane only): node build.mjs app ../examples/focus-today

import { recentActivity, now, dayStart } from 'cowork:app/context@0.1.0';

// "3 h 12 min", "42 min", "0 min"
function duration(ms) {
  const minutes = Math.round(ms / 60000);
  const hours = Math.floor(minutes / 60);
  if (hours === 0) return `${minutes} min`;
  const rest = minutes % 60;
  return rest === 0 ? `${hours} h` : `${hours} h ${rest} min`;
}

// Time per app today, longest first: [{ app, ms, title }] (title: the window
// the app spent the longest on).
function today() {
  // s64 values are BigInts: convert once, the numbers stay exact (< 2^53).
  const start = Number(dayStart());
  const end = Number(now());
  const sessions = recentActivity(dayStart(), now(), undefined, 1000);
  const apps = new Map();
  for (const session of sessions) {
    // A session can have started before midnight or still be going on.
    const ms = Math.min(Number(session.endMs), end) - Math.max(Number(session.startMs), start);
    if (ms <= 0) continue;
    const app = apps.get(session.app) ?? { app: session.app, ms: 0, titles: new Map() };
    app.ms += ms;
    app.titles.set(session.title, (app.titles.get(session.title) ?? 0) + ms);
    apps.set(session.app, app);
  }
  const ranked = [...apps.values()].sort((a, b) => b.ms - a.ms);
  for (const app of ranked) {
    let best = '';
    let bestMs = -1;
    for (const [title, ms] of app.titles) {
      if (ms > bestMs) { best = title; bestMs = ms; }
    }
    app.title = best;
  }
  return { ranked, truncated: sessions.length >= 1000 };
}

export function render(state) {
  const { ranked, truncated } = today();
  if (ranked.length === 0) {
    return JSON.stringify([
      { type: 'text', text: 'Nothing recorded today yet', style: 'muted' },
      { type: 'actions', actions: [{ title: 'Refresh', id: 'refresh' }] },
    ]);
  }
  const total = ranked.reduce((sum, app) => sum + app.ms, 0);
  const top = ranked.slice(0, 8);
  const view = [
    { type: 'stat', label: 'Focused today', value: duration(total), note: `across ${ranked.length} app${ranked.length === 1 ? '' : 's'}` },
    {
      type: 'chart',
      kind: 'bar',
      title: 'Time per app today',
      unit: 'min',
      bars: top.map(app => ({ label: app.app, value: Math.round(app.ms / 6000) / 10 })),
      fallback: top.map(app => `${app.app}: ${duration(app.ms)}`).join(', '),
    },
    {
      type: 'list',
      items: top.map(app => ({ title: app.app, subtitle: app.title, accessory: duration(app.ms) })),
      empty: 'Nothing recorded today yet',
    },
  ];
  if (truncated) {
    view.push({ type: 'text', text: 'Counted from the first 1000 sessions of the day only.', style: 'muted' });
  }
  view.push({ type: 'actions', actions: [{ title: 'Refresh', id: 'refresh' }] });
  return JSON.stringify(view);
}

// The only action is Refresh: the state does not change, and cowork draws
// render(state) again, which reads the activity afresh.
export function handle(action, state) {
  return state;
}
