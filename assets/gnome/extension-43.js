// cowork's GNOME Shell extension, GNOME 43–44 (legacy `imports`). The shared
// part (core.js) is written in where the marker below is when cowork installs it.
/* exported init */
const {Gio, GLib, Meta, Shell, St} = imports.gi;
const ExtensionUtils = imports.misc.extensionUtils;

// @COWORK_CORE@

class CoworkExtension {
    enable() {
        this._desktop = new CoworkDesktop({Gio, GLib, Meta, Shell, St, global}, ExtensionUtils.getCurrentExtension().path);
        this._desktop.enable();
    }

    disable() {
        this._desktop.disable();
        this._desktop = null;
    }
}

function init() {
    return new CoworkExtension();
}
