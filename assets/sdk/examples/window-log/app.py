"""Window log: today's windows as a table, newest first, with a total and a
filter by app. A Python app, built with componentize-py:

    componentize-py -d ../../wit -w app componentize --stub-wasi app -o app.wasm

`--stub-wasi` replaces the WASI imports CPython brings (files, clocks, stdio)
with stubs that trap: cowork links only its own interfaces, so an app that
needs WASI is refused at install. The clock is `context.now()`.

The filter (an app name, or "" for every app) lives in storage, so the state
stays "".
"""

import json

import wit_world
from wit_world.imports import context, data

ALL = "All apps"
LIMIT = 200


def minutes(ms: int) -> str:
    total = max(0, ms) // 60_000
    return f"{total // 60} h {total % 60:02d} min" if total >= 60 else f"{total} min"


def clock(ms: int, day_start: int) -> str:
    """The time of day of `ms`, from the lane's midnight (no time zone database here)."""
    into = (ms - day_start) // 60_000
    return f"{(into // 60) % 24:02d}:{into % 60:02d}"


class WitWorld(wit_world.WitWorld):
    def render(self, state: str) -> str:
        now = context.now()
        start = context.day_start()
        only = data.storage_get("app") or ""
        sessions = context.recent_activity(start, now, only or None, LIMIT)
        apps = sorted({s.app for s in context.recent_activity(start, now, None, LIMIT)} | ({only} if only else set()))
        total = sum(min(s.end_ms, now) - max(s.start_ms, start) for s in sessions)
        rows = [
            [clock(max(s.start_ms, start), start), s.app, s.title, minutes(min(s.end_ms, now) - max(s.start_ms, start))]
            for s in reversed(sessions)
        ]
        active = context.active_window()
        view = [
            {"type": "stat", "label": f"Today in {only}" if only else "Today", "value": minutes(total),
             "note": f"{len(sessions)} windows"},
            {"type": "form", "id": "filter", "submit": "Show",
             "fields": [{"id": "app", "label": "App", "kind": "select", "value": only or ALL, "options": [ALL] + apps}]},
            {"type": "table", "columns": ["Started", "App", "Window", "Time"], "rows": rows,
             "fallback": f"{len(rows)} windows today"},
        ]
        if active is not None:
            view.append({"type": "actions", "actions": [
                {"title": f"Only {active.app}", "id": "only", "data": active.app},
                {"title": "Ask about today", "host": "chat",
                 "text": f"What did I spend most of my time on today in {only or 'all my apps'}?"},
            ]})
        return json.dumps(view)

    def handle(self, action: str, state: str) -> str:
        event = json.loads(action)
        if event.get("type") == "submit" and event.get("form") == "filter":
            chosen = str(event.get("values", {}).get("app", ALL))
            data.storage_set("app", "" if chosen == ALL else chosen)
        elif event.get("type") == "action" and event.get("id") == "only":
            data.storage_set("app", str(event.get("data") or ""))
        return state
