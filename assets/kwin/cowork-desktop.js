// cowork's KWin script (KDE Plasma on Wayland, where KWin tells ordinary apps
// nothing about other windows). cowork loads it over D-Bus at start
// (org.kde.KWin /Scripting loadScript + run) and unloads it at quit. It tells
// cowork, and only cowork (its unique bus name is written in below when the
// script is loaded), which window has the focus: its caption, resource class
// and name, pid, fullscreen state and KWin's id — again whenever the focus
// moves or the focused window's caption or fullscreen state changes. Signals
// only: nothing polls.
//
// Plasma 6 names the API workspace.windowActivated / activeWindow /
// windowRemoved; Plasma 5 clientActivated / activeClient / clientRemoved.
// Both are handled here (Plasma 5.27 is what the tests run).

var COWORK = "@COWORK_BUS_NAME@";
var PATH = "/org/cowork/KWin";
var IFACE = "org.cowork.KWin1";

function active() {
    return workspace.activeWindow !== undefined ? workspace.activeWindow : workspace.activeClient;
}

function idOf(window) {
    return window ? String(window.internalId) : "";
}

function tell(window) {
    if (!window) {
        callDBus(COWORK, PATH, IFACE, "Focused", "", "", "", 0, false, "");
        return;
    }
    callDBus(COWORK, PATH, IFACE, "Focused", String(window.caption), String(window.resourceClass), String(window.resourceName),
        window.pid > 0 ? window.pid : 0, window.fullScreen === true, idOf(window));
}

var watched = {};

// A caption or fullscreen change of the focused window is told again; of another window, not.
function watch(window) {
    var id = idOf(window);
    if (!window || watched[id]) {
        return;
    }
    watched[id] = true;
    var again = function () {
        if (idOf(active()) === id) {
            tell(window);
        }
    };
    window.captionChanged.connect(again);
    window.fullScreenChanged.connect(again);
}

var activated = workspace.windowActivated !== undefined ? workspace.windowActivated : workspace.clientActivated;
var removed = workspace.windowRemoved !== undefined ? workspace.windowRemoved : workspace.clientRemoved;

activated.connect(function (window) {
    watch(window);
    tell(window);
});
removed.connect(function (window) {
    delete watched[idOf(window)];
});

watch(active());
tell(active());
