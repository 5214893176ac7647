// cowork's window-list script (KDE Plasma on Wayland): the agent's
// list_windows and focus_window. cowork loads it once per request, with its
// unique bus name and, to focus one, KWin's id of that window written in; it
// tells cowork, and only cowork, the normal windows (caption, resource class
// and name, pid, KWin's id, whether it has the focus) after focusing the one
// asked for, and is unloaded at once. Plasma 6 and Plasma 5 names both.

var COWORK = "@COWORK_BUS_NAME@";
var ACTIVATE = "@ACTIVATE@";

function windows() {
    return workspace.windowList !== undefined ? workspace.windowList() : workspace.clientList();
}

function active() {
    return workspace.activeWindow !== undefined ? workspace.activeWindow : workspace.activeClient;
}

function focus(window) {
    if (workspace.activeWindow !== undefined) {
        workspace.activeWindow = window;
    } else {
        workspace.activeClient = window;
    }
}

var list = windows();
var out = [];
for (var i = 0; i < list.length; i++) {
    var w = list[i];
    if (!w.normalWindow) {
        continue;
    }
    if (ACTIVATE !== "" && String(w.internalId) === ACTIVATE) {
        focus(w);
    }
}
for (var j = 0; j < list.length; j++) {
    var v = list[j];
    if (v.normalWindow) {
        out.push([String(v.caption), String(v.resourceClass), String(v.resourceName), v.pid > 0 ? v.pid : 0, String(v.internalId), v === active()]);
    }
}
callDBus(COWORK, "/org/cowork/KWin", "org.cowork.KWinWindows1", "Windows", JSON.stringify(out));
