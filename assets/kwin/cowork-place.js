// cowork's placement script (KDE Plasma on Wayland, where an app cannot
// place its own windows): the sidebar is kept above other windows, on every
// virtual desktop, docked to the right edge of the work area at its full
// height; the quick prompt is kept above, centred a third of the way down
// and given the focus. Only cowork's own windows are touched: by its pid and
// their title. cowork loads one such script per kind of window each time it
// asks for a placement (the previous one of that kind is unloaded first) and
// unloads them at quit. Plasma 6 and Plasma 5 names are both handled.

var PID = Number("@COWORK_PID@");
var TITLE = "@TITLE@";
var KIND = "@KIND@";
var WIDTH = Number("@WIDTH@");
var HEIGHT = Number("@HEIGHT@");

function place(window) {
    if (!window || window.pid !== PID || String(window.caption) !== TITLE) {
        return;
    }
    var area = workspace.clientArea(KWin.MaximizeArea, window);
    var width = Math.max(1, Math.min(WIDTH, area.width));
    window.keepAbove = true;
    if (KIND === "sidebar") {
        window.onAllDesktops = true;
        window.frameGeometry = { x: area.x + area.width - width, y: area.y, width: width, height: area.height };
        return;
    }
    var height = Math.max(1, Math.min(HEIGHT, area.height));
    window.frameGeometry = {
        x: area.x + Math.floor((area.width - width) / 2),
        y: area.y + Math.floor((area.height - height) / 3),
        width: width,
        height: height
    };
    if (workspace.activeWindow !== undefined) {
        workspace.activeWindow = window;
    } else {
        workspace.activeClient = window;
    }
}

// cowork's windows, now and as they appear, are placed, and again when they get this title.
function watch(window) {
    if (!window || window.pid !== PID) {
        return;
    }
    window.captionChanged.connect(function () {
        place(window);
    });
    place(window);
}

var added = workspace.windowAdded !== undefined ? workspace.windowAdded : workspace.clientAdded;
added.connect(watch);
var windows = workspace.windowList !== undefined ? workspace.windowList() : workspace.clientList();
for (var i = 0; i < windows.length; i++) {
    watch(windows[i]);
}
